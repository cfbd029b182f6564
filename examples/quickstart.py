"""Quick start: everything infoxlm can do today, end to end, on a CPU in seconds.

    python examples/quickstart.py [--output out/quickstart]

1. learns a small SentencePiece-style vocabulary from a few sentences in nine languages,
   with languages sampled by p ∝ (n_l / n)^α;
2. builds a small random XLM-R encoder and saves it, tokenizer included, as a Hugging Face
   directory;
3. reloads that directory with transformers (when installed) and checks that tokens and
   hidden states are identical;
4. embeds every sentence and retrieves each translation by cosine similarity.

The encoder is untrained, so step 4 shows the measuring stick, not a result: retrieval stays
near chance until a model is pre-trained with cross-lingual contrast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import infoxlm

# The same six sentences in nine languages (line i of every language means the same).
SENTENCES = {
    "en": [
        "The weather is nice today.",
        "I would like a cup of coffee, please.",
        "Where is the train station?",
        "My sister lives in a small village near the sea.",
        "This book was written a hundred years ago.",
        "Please save the document before you close the program.",
    ],
    "de": [
        "Das Wetter ist heute schön.",
        "Ich hätte gern eine Tasse Kaffee, bitte.",
        "Wo ist der Bahnhof?",
        "Meine Schwester wohnt in einem kleinen Dorf am Meer.",
        "Dieses Buch wurde vor hundert Jahren geschrieben.",
        "Bitte speichern Sie das Dokument, bevor Sie das Programm schließen.",
    ],
    "fr": [
        "Il fait beau aujourd'hui.",
        "Je voudrais une tasse de café, s'il vous plaît.",
        "Où est la gare ?",
        "Ma sœur habite dans un petit village près de la mer.",
        "Ce livre a été écrit il y a cent ans.",
        "Veuillez enregistrer le document avant de fermer le programme.",
    ],
    "es": [
        "Hoy hace buen tiempo.",
        "Quisiera una taza de café, por favor.",
        "¿Dónde está la estación de tren?",
        "Mi hermana vive en un pequeño pueblo cerca del mar.",
        "Este libro fue escrito hace cien años.",
        "Guarde el documento antes de cerrar el programa.",
    ],
    "ru": [
        "Сегодня хорошая погода.",
        "Я бы хотел чашку кофе, пожалуйста.",
        "Где находится вокзал?",
        "Моя сестра живёт в маленькой деревне у моря.",
        "Эта книга была написана сто лет назад.",
        "Пожалуйста, сохраните документ перед закрытием программы.",
    ],
    "el": [
        "Ο καιρός είναι ωραίος σήμερα.",
        "Θα ήθελα ένα φλιτζάνι καφέ, παρακαλώ.",
        "Πού είναι ο σιδηροδρομικός σταθμός;",
        "Η αδελφή μου μένει σε ένα μικρό χωριό κοντά στη θάλασσα.",
        "Αυτό το βιβλίο γράφτηκε πριν από εκατό χρόνια.",
        "Αποθηκεύστε το έγγραφο πριν κλείσετε το πρόγραμμα.",
    ],
    "zh": [
        "今天天气很好。",
        "请给我一杯咖啡。",
        "火车站在哪里？",
        "我的姐姐住在海边的一个小村庄里。",
        "这本书是一百年前写的。",
        "关闭程序之前请保存文档。",
    ],
    "ar": [
        "الطقس جميل اليوم.",
        "أريد فنجان قهوة من فضلك.",
        "أين محطة القطار؟",
        "تعيش أختي في قرية صغيرة بالقرب من البحر.",
        "كُتب هذا الكتاب قبل مئة عام.",
        "يرجى حفظ المستند قبل إغلاق البرنامج.",
    ],
    "hi": [
        "आज मौसम अच्छा है।",
        "मुझे एक कप कॉफ़ी चाहिए, कृपया।",
        "रेलवे स्टेशन कहाँ है?",
        "मेरी बहन समुद्र के पास एक छोटे से गाँव में रहती है।",
        "यह किताब सौ साल पहले लिखी गई थी।",
        "कृपया प्रोग्राम बंद करने से पहले दस्तावेज़ सहेजें।",
    ],
}


def step(number: int, text: str) -> None:
    print(f"\n[{number}/4] {text}")


def cross_check_with_transformers(model_dir: Path, tokenizer: infoxlm.Tokenizer, encoder: infoxlm.Encoder) -> None:
    try:
        import transformers
    except ImportError:
        print("    transformers is not installed; skipped (pip install 'infoxlm[hf]')")
        return
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    theirs = transformers.XLMRobertaForMaskedLM.from_pretrained(model_dir).eval()
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    texts = [s for lines in SENTENCES.values() for s in lines]
    same_ids = all(their_tokenizer(t)["input_ids"] == tokenizer.encode(t) for t in texts)
    input_ids, attention_mask = tokenizer.pad(tokenizer.encode_batch(texts))
    with torch.no_grad():
        ours = encoder.eval()(input_ids, attention_mask).last_hidden_state
        ref = theirs(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states[-1]
    diff = (ours - ref)[attention_mask.bool()].abs().max().item()
    print(f"    transformers {transformers.__version__}: {type(theirs).__name__} + {type(their_tokenizer).__name__}")
    print(f"    token ids identical on {len(texts)} sentences: {same_ids}; max |Δ hidden state| = {diff:.2e}")


def retrieval_accuracy(model_dir: Path) -> None:
    english = SENTENCES["en"]
    en = infoxlm.embed(model_dir, english, pooling="mean")
    en /= np.linalg.norm(en, axis=1, keepdims=True)
    print(f"    {'lang':<6}{'xx→en top-1':>12}   (chance = {100 / len(english):.0f}%)")
    for lang, lines in SENTENCES.items():
        if lang == "en":
            continue
        xx = infoxlm.embed(model_dir, lines, pooling="mean")
        xx /= np.linalg.norm(xx, axis=1, keepdims=True)
        hits = (xx @ en.T).argmax(axis=1) == np.arange(len(lines))
        print(f"    {lang:<6}{100 * hits.mean():>11.0f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=Path("out/quickstart"), help="default: out/quickstart")
    args = parser.parse_args()
    torch.manual_seed(0)

    step(1, "learning a vocabulary")
    text_dir = args.output / "text"
    text_dir.mkdir(parents=True, exist_ok=True)
    for lang, lines in SENTENCES.items():
        (text_dir / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = {lang: [text_dir / f"{lang}.txt"] for lang in SENTENCES}
    tokenizer = infoxlm.train_tokenizer(files, args.output / "tokenizer", vocab_size=400, show_progress=False)
    print(f"    {tokenizer.vocab_size} pieces; '{SENTENCES['de'][2]}' → {tokenizer.encode(SENTENCES['de'][2])}")

    step(2, "building a small XLM-R encoder and saving it as a Hugging Face directory")
    config = infoxlm.EncoderConfig.of_size("tiny", vocab_size=tokenizer.vocab_size)
    encoder = infoxlm.Encoder(config)
    model_dir = encoder.save_pretrained(args.output / "model", tokenizer)
    files = ", ".join(sorted(p.name for p in model_dir.iterdir()))
    print(f"    {sum(p.numel() for p in encoder.parameters()):,} parameters → {model_dir}/ ({files})")

    step(3, "reloading it with transformers")
    cross_check_with_transformers(model_dir, tokenizer, encoder)

    step(4, "embedding the sentences and retrieving translations (untrained model)")
    retrieval_accuracy(model_dir)


if __name__ == "__main__":
    main()

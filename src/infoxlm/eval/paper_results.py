"""The InfoXLM paper's published numbers (base size), for reference rows beside our own.

Copied by hand from the paper's tables (Chi et al., 2021, NAACL): Table "xnli" (XNLI accuracy,
#M=1 rows), Table "mlqa" (MLQA F1 / EM), Table "xir15" (Tatoeba top-1 on the 14 languages with
parallel data) and Table "gap" (transfer gaps). "(reimpl)" rows are the authors' own fine-tuning
of XLM-R with their protocol; InfoXLM and XLM-R (reimpl) scores are means of five seeds.
"""

from __future__ import annotations

XNLI_LANGS = ("en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur")

# setting → model → 15 accuracies in XNLI_LANGS order + the paper's Avg.
XNLI = {
    "cross-lingual-transfer": {
        "XLM-R (reimpl)": (84.7, 79.1, 79.4, 77.4, 76.6, 78.4, 76.0, 73.5, 72.6, 75.5, 73.0, 74.5, 71.0, 65.7, 67.6, 75.0),
        "InfoXLM": (86.4, 80.3, 80.9, 79.3, 77.8, 79.3, 77.6, 75.6, 74.2, 77.1, 74.6, 77.0, 72.2, 67.5, 67.3, 76.5),
        "InfoXLM −XLCO": (86.5, 80.5, 80.3, 78.7, 77.3, 78.8, 77.4, 74.6, 73.8, 76.8, 73.7, 76.7, 71.8, 66.3, 66.4, 76.0),
    },
    "translate-train-all": {
        "XLM-R (reimpl)": (85.0, 81.0, 81.9, 80.6, 79.7, 81.4, 79.5, 77.7, 77.3, 79.5, 77.5, 79.1, 75.3, 72.2, 70.9, 78.6),
        "InfoXLM": (86.5, 82.6, 83.0, 82.3, 81.3, 82.4, 80.6, 79.5, 78.9, 81.0, 78.9, 80.7, 77.8, 73.3, 71.6, 80.0),
    },
}

MLQA_LANGS = ("en", "es", "de", "ar", "hi", "vi", "zh")
# model → (F1, EM) per language in MLQA_LANGS order + the paper's Avg.
MLQA = {
    "XLM-R (reimpl)": ((80.2, 67.0), (67.7, 49.9), (62.1, 47.7), (56.1, 37.2), (61.1, 44.0), (67.0, 46.3), (61.4, 38.5), (65.1, 47.2)),
    "InfoXLM": ((81.6, 68.3), (69.8, 51.6), (64.3, 49.4), (60.6, 40.9), (65.2, 47.1), (70.2, 49.0), (64.8, 41.3), (68.1, 49.6)),
    "InfoXLM −XLCO": ((81.2, 68.1), (69.6, 51.9), (64.0, 49.3), (59.7, 40.2), (64.0, 46.3), (69.3, 48.0), (64.1, 40.6), (67.4, 49.2)),
}

TATOEBA_LANGS = ("ar", "bg", "zh", "de", "el", "fr", "hi", "ru", "es", "sw", "th", "tr", "ur", "vi")
# direction → model → 14 top-1 accuracies in TATOEBA_LANGS order + the paper's Avg.
TATOEBA = {
    "xx2en": {
        "XLM-R": (36.8, 67.6, 60.7, 89.9, 53.7, 74.1, 54.2, 72.5, 74.0, 18.7, 38.3, 61.1, 36.6, 68.4, 57.6),
        "InfoXLM": (59.0, 78.6, 86.3, 93.9, 62.1, 79.4, 87.1, 83.8, 88.2, 39.5, 84.9, 83.3, 73.0, 89.6, 77.8),
        "InfoXLM −XLCO": (42.9, 65.5, 69.5, 91.1, 55.6, 76.4, 71.6, 74.9, 74.8, 20.5, 68.1, 69.8, 51.6, 81.8, 65.3),
    },
    "en2xx": {
        "XLM-R": (38.6, 69.9, 60.3, 89.4, 57.3, 74.3, 49.3, 73.0, 74.6, 14.4, 58.4, 64.0, 36.9, 72.5, 59.5),
        "InfoXLM": (68.6, 78.6, 86.4, 95.1, 72.6, 84.0, 88.3, 85.7, 87.2, 40.8, 91.2, 84.7, 73.3, 92.0, 80.6),
        "InfoXLM −XLCO": (45.4, 64.0, 69.3, 88.1, 56.5, 72.3, 69.6, 73.6, 71.5, 22.1, 79.7, 64.3, 48.2, 79.8, 64.6),
    },
}

# Table "gap": model → (MLQA F1 gap, XNLI gap) in the cross-lingual transfer setting.
TRANSFER_GAP = {
    "mBERT": (23.3, 16.9),
    "XLM-R": (17.6, 10.4),
    "InfoXLM": (15.8, 10.3),
    "InfoXLM −XLCO": (16.1, 11.0),
}

# Table "ablations" (InfoXLM15: 15 languages, 100K steps; means of five fine-tuning runs):
# model → (XNLI accuracy, MLQA F1, MLQA EM). The paper ablates mixup and momentum on −TLM.
ABLATIONS = {
    "InfoXLM": (76.45, 67.87, 49.58),
    "−XLCO": (76.24, 67.43, 49.23),
    "−TLM": (75.85, 67.84, 49.54),
    "−TLM −XLCO": (75.33, 66.86, 48.82),
    "−TLM −Mixup": (75.43, 67.21, 49.19),
    "−TLM −Momentum": (75.32, 66.58, 48.66),
}

# Table "coxl-layer" (InfoXLM15): (model, layer XLCO contrasts, of 12) → (XNLI, MLQA F1, MLQA EM).
CONTRAST_LAYER = {
    ("InfoXLM", 8): (76.45, 67.87, 49.58),
    ("InfoXLM", 12): (76.12, 67.83, 49.50),
    ("−TLM", 8): (75.58, 67.42, 49.27),
    ("−TLM", 12): (75.85, 67.84, 49.54),
}

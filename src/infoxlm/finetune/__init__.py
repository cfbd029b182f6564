"""Fine-tuning on the paper's cross-lingual benchmarks: XNLI classification and MLQA extractive QA.

``training.py`` holds the loop both tasks share (AdamW, linear warm-up/decay, seeding, periodic
evaluation, best-checkpoint selection); ``seeds.py`` the driver that runs either task over several
seeds; ``heads.py`` the task heads with Hugging Face's key names; ``classification.py`` and
``qa.py`` the two tasks; ``qa_windows.py`` / ``qa_decoding.py`` the SQuAD-style feature building
and span decoding; ``eval/results.py`` transfer gap and seed averaging.
"""

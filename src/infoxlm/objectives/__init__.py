"""The pre-training objectives: masked LM (MMLM, TLM) and cross-lingual contrast (XLCO)."""

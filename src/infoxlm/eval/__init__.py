"""Evaluation: bitext retrieval (Tatoeba, layer-wise) and its reports."""

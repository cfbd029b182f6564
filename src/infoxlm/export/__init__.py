"""Handing a model on: sentence-transformers directories and Hugging Face model cards."""

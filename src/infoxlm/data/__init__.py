"""Data preparation for pre-training: corpus reading, language sampling and example stores."""

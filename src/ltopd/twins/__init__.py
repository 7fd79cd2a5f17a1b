"""The twin factory: everything that makes and releases a tiny twin (tokenizer, architectures,
pretraining, the release build with its gates and manifest)."""

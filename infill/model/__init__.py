"""The model layer: networks (network), their tokenizers (tokenizer), and reuse of encoded context across fills (context_cache). Knows nothing of grammars, requests or editors."""

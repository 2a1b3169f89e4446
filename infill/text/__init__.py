"""Text with holes: finding and applying `<FILL>` markers (holes), str/byte/LSP positions (textpos), the word before a cursor (cursor), and safe file I/O (files). No model, no grammar."""

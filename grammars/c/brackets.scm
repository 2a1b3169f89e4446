; Bracket tokens (anonymous nodes). Openers and closers are paired in languages.toml.
["(" ")" "[" "]" "{" "}"] @bracket

; Bracket tokens (anonymous nodes). Openers and closers are paired in languages.toml;
; a template substitution's "${" is closed by "}".
["(" ")" "[" "]" "{" "}" "${"] @bracket

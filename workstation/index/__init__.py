"""The knowledge map: parse source files into symbols, references and imports, and index them."""

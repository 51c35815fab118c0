"""PTX support: parser (parser.py), SIMT simulator (sim/) and grid launcher (launch.py)."""

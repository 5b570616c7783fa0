"""evalkit's Jinja2 prompt templates (``*.jinja``), installed as ``evalkit.prompt_templates``."""

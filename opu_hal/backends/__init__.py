"""Built-in backends; each module is imported only when one of its devices is built."""

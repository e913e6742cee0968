"""nbsupport: the support package of the course on ambiguity and diversity in NMT."""
__version__ = "0.1.0"

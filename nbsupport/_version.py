__version__ = "0.1.0"   # part of every cache key: a new version never loads an old cache

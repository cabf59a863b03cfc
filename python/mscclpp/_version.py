__version__ = "0.9.0+libmscclpp.1"

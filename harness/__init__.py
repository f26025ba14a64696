"""dmlconform harness: specs -> descriptors -> backends -> diff -> reports."""

__version__ = "0.1.0"

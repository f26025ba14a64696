"""Backends: implementations of DirectML operators that run the same cases and are diffed."""

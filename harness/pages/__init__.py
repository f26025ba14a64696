"""Reading DirectML API reference pages: the facts a spec transcribes (fields, availability,
in-place permission, constraints, every support table), from Microsoft's docs markdown or the
rendered text of the published pages in English, French or German; a spec skeleton from them
(`spec import`) and the drift between a spec and its pages (`spec check-docs`)."""

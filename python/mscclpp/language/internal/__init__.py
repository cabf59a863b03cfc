"""Internal machinery of the DSL: types, operations, passes and serialisation."""

"""guards: sources, guard kinds and compiled cache checks (a leaf package: imports nothing from dynamo or inductor)."""

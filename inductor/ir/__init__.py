"""The loop IR: index symbols, layouts, nodes, the `ops` handler, printer and verifier."""

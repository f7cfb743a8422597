"""Stage "schedule": loop IR -> kernel plans (dependencies, fusion, buffer lifetimes)."""

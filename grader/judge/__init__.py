"""The judge: tier registry, the pytest plugin the tier suites run under, and the runner."""

"""End-to-end tests with real agent CLIs (installed from npm by ``nox -s e2e``)."""

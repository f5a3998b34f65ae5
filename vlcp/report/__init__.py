"""Tables, plots and claims ledgers as pure functions of `results.json` files."""

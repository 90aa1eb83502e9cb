"""Checks of the module `mage` that need a GPU and torch, run by hand (see
python/README.md); their pure parts are tested in python/tests."""

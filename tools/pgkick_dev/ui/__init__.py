"""The web dashboard (`pgkick ui`, and `pgkick dev` at /): see pgkick_dev.ui.app."""

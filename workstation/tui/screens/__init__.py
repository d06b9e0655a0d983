"""Screens and modal dialogs pushed over the main layout."""

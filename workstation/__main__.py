from .entry import entry  # the console script's entry: --version and the app without click

entry()

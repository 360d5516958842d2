"""``python -m webfreeze.demo`` (``make demo``): the whole loop on the shipped demo."""

from webfreeze.demo import main

main()

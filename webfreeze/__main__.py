from webfreeze.cli import main

main()

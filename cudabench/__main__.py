from cudabench.cli.app import main

main()

from cudabench.cli import main

main()

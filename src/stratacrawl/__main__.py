from stratacrawl.cli import main

main()

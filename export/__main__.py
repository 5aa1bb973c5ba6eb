from export.llama import main

main()

from tracetui.cli.main import main

raise SystemExit(main())

from tracetui.cli import main

raise SystemExit(main())

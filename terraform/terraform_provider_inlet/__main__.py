from terraform_provider_inlet.main import main

raise SystemExit(main())

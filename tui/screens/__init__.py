"""The app's screens: the main one, the load-error screen and the dialogs."""

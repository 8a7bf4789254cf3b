"""A terminal driver whose input thread breaks (``TEXTUAL_DRIVER=broken_driver:BrokenInput``): Textual
closes the app with a traceback, what any failure of its own would do."""

from textual.drivers.linux_driver import LinuxDriver


class BrokenInput(LinuxDriver):
    def run_input_thread(self) -> None:
        raise RuntimeError("the input thread broke")

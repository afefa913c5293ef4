// Preloaded by tools/test_sanitized.sh: dlclose does nothing, so that libraries unloaded before the
// process ends (Open MPI's and PMIx's components at MPI_Finalize, the server's backends at unload,
// CPython's extension modules) are still mapped when LeakSanitizer symbolizes its stacks at exit.
// Their leaks then carry module names, which tools/sanitizers/lsan.supp matches, instead of
// "<unknown module>", which nothing can.
int dlclose(void* handle) {
  (void)handle;
  return 0;
}

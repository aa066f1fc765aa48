// The IDL of the Thrift cases of exitcodes.txt ($IDL there).
service Echo {
  string echo(1: string s)
}

include "base.thrift"

struct Shape {
  1: required string name
  2: optional list<base.Point> points
  3: optional set<base.Color> colors
  4: optional map<string, i64> sizes
  5: optional map<i32, string> labels
  6: optional binary blob
  7: optional base.Timestamp at
  8: optional double ratio
  9: optional bool closed
  10: optional i8 tiny
  11: optional i16 small
  12: optional Shape inner
}

service Shapes extends base.Base {
  Shape echo(1: Shape s)
  void put(1: required string name, 2: Shape s) throws (1: base.Missing missing)
  oneway void fire(1: string what)
}

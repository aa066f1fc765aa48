enum Color { RED = 1, GREEN = 2 }
typedef i64 Timestamp
struct Point { 1: required i32 x, 2: optional i32 y }
exception Missing { 1: string what }
service Base { string ping() }

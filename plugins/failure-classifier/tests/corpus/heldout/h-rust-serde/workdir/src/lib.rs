use serde::Serialize;

#[derive(Serialize)]
pub struct P { pub x: i32 }

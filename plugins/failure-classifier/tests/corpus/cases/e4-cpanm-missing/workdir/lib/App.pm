package App;
use Text::Table::Tiny;
1;

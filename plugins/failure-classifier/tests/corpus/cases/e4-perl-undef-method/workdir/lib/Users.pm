package Users;
use strict;
my %by_id = (1 => { name => 'ann' });
sub find { my $u = $by_id{$_[0]}; return $u ? bless({%$u}, 'User') : undef }
sub name_of { return find($_[0])->name }
package User;
sub name { $_[0]{name} }
1;

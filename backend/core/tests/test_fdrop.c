/* placeholder: replaced by the module owner */
int main(void) { return 77; }

"""A generic context line (``}``) at a segment's edge is matched at the copy nearest the
segment's unique lines, not at a lookalike further off (issue 11, lazy precision).

The example is reduced from a real edit of cJSON's tests/misc_tests.c: a new test
function is added after ``}`` and before ``int main(void)``. Its body shares lines with
the function before (``cJSON *number = ...``) and with an earlier one; before the fix
the ``}`` was read as an earlier function's and three lines in between were removed
(a wrong merge, only flagged as unsure)."""

from __future__ import annotations

from fastapply.merge import apply_snippet

HELPERS = "".join(f"static void helper_{k}(void) {{\n    step();\n}}\n\n" for k in range(16))
ORIGINAL = HELPERS + """static void make_number(void) {
    cJSON *number = cJSON_CreateNumber(42);
}

static void cjson_create_array_reference_should_create_an_array_reference(void) {
    cJSON *number_reference = NULL;
    cJSON *number_array = cJSON_CreateArray();
    cJSON *number = cJSON_CreateNumber(42);

    TEST_ASSERT_TRUE(cJSON_IsNumber(number));
    TEST_ASSERT_TRUE(cJSON_IsArray(number_array));
    cJSON_AddItemToArray(number_array, number);

    number_reference = cJSON_CreateArrayReference(number);
    TEST_ASSERT_TRUE(number_reference->child == number);
    TEST_ASSERT_EQUAL_INT(cJSON_Array | cJSON_IsReference, number_reference->type);

    cJSON_Delete(number_array);
    cJSON_Delete(number_reference);
}

int main(void)
{
    RUN_TEST(cjson_create_object_reference_should_create_an_object_reference);
    RUN_TEST(cjson_create_array_reference_should_create_an_array_reference);

    return UNITY_END();
}
"""
ALIASED = "cjson_add_item_to_object_should_not_use_after_free_when_string_is_aliased"
NEW_TEST = "static void " + ALIASED + """(void)
{
    cJSON *object = cJSON_CreateObject();
    cJSON *number = cJSON_CreateNumber(42);
    char *name = (char*)cJSON_strdup((const unsigned char*)"number", &global_hooks);

    TEST_ASSERT_NOT_NULL(object);
    TEST_ASSERT_NOT_NULL(number);
    TEST_ASSERT_NOT_NULL(name);

    number->string = name;

    /* The following should not have a use after free
     * that would show up in valgrind or with AddressSanitizer */
    cJSON_AddItemToObject(object, number->string, number);

    cJSON_Delete(object);
}

"""
SNIPPET = "// ... code unchanged ...\n}\n\n" + NEW_TEST + """int main(void)
{
    // ... code unchanged ...
    RUN_TEST(cjson_create_object_reference_should_create_an_object_reference);
    RUN_TEST(cjson_create_array_reference_should_create_an_array_reference);
    RUN_TEST(""" + ALIASED + """);

    return UNITY_END();
// ... code unchanged ...
"""


def test_a_new_function_after_a_closing_brace_goes_before_its_unique_neighbour() -> None:
    run_array = "    RUN_TEST(cjson_create_array_reference_should_create_an_array_reference);\n"
    want = ORIGINAL.replace("int main", NEW_TEST + "int main").replace(
        run_array, run_array + f"    RUN_TEST({ALIASED});\n")
    result = apply_snippet(ORIGINAL, SNIPPET)
    assert result.text == want
    assert not result.uncertain

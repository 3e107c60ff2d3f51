#include "switchyard/status.h"

const char *sy_status_name(sy_status st)
{
    switch (st) {
#define SY_STATUS_NAME_(name, value, msg) \
    case name:                            \
        return #name;
        SY_STATUS_TABLE(SY_STATUS_NAME_)
#undef SY_STATUS_NAME_
    }
    return "SY_E_UNKNOWN";
}

const char *sy_status_str(sy_status st)
{
    switch (st) {
#define SY_STATUS_STR_(name, value, msg) \
    case name:                           \
        return msg;
        SY_STATUS_TABLE(SY_STATUS_STR_)
#undef SY_STATUS_STR_
    }
    return "unknown status";
}
